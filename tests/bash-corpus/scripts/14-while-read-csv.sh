# IFS=, read of a CSV, skipping the header
tail -n +2 data/people.csv | while IFS=, read -r name age city; do
  [ "$age" -gt 30 ] && echo "$name ($city)"
done
