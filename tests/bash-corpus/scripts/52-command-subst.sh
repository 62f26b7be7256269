# command substitution
count=$(wc -l < notes.txt)
echo "notes has $count lines"
echo "first word: $(head -1 data/words.txt | tr a-z A-Z)"
echo "nested: $(echo $(echo inner))"
