# file names with spaces
cat "with space.txt"
for f in *.txt; do echo "[$f]"; done
