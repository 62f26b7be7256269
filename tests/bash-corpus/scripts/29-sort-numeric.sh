# sort -n, -r, -u
sort -n data/numbers.txt | head -5
sort -nr data/numbers.txt | head -3
sort -nu data/numbers.txt | wc -l
