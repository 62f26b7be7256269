# awk: sum a CSV column
awk -F, 'NR > 1 { sum += $2; n++ } END { print "avg", sum / n, "n", n }' data/people.csv
