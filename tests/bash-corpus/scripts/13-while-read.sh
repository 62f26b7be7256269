# while read over a file
n=0
while IFS= read -r line; do
  n=$((n + 1))
  echo "$n: $line"
done < data/words.txt | tail -3
