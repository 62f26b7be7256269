# sort | uniq -c | sort -rn
sort data/words.txt | uniq -c | sort -rn | head -3
