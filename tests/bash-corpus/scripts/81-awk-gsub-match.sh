# awk gsub, match, toupper
awk '{ gsub(/o/, "0"); print }' docs/guide.md | tail -2
awk 'match($0, /[0-9]+%/) { print substr($0, RSTART, RLENGTH) }' logs/app.log
awk -F, 'NR>1 { print toupper($1) }' data/people.csv | head -2
