# grep -n, -c, -v, -r, -o, -E
grep -n ERROR logs/app.log
grep -c INFO logs/app.log
grep -v -c a notes.txt
grep -rl TODO src | sort
grep -oE '[0-9]+%' logs/app.log
