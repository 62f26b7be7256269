# head and tail variants
head -n 2 notes.txt
tail -n 2 notes.txt
tail -n +11 notes.txt
head -c 5 notes.txt; echo
