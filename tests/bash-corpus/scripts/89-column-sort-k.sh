# column -t and sort by a column
tail -n +2 data/people.csv | tr , ' ' | sort -k2 -n | column -t
