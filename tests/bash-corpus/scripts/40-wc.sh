# wc -l, -w, -c on files
wc -l notes.txt
wc -w README.md
wc -c data/numbers.txt
cat notes.txt | wc -l
