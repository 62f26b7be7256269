# sed address ranges with regexes
sed -n '/^## Usage/,/^TODO/p' README.md
sed '/beta/,/delta/s/^/> /' notes.txt | head -5
