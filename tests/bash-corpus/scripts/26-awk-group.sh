# awk: group by with arrays (sorted afterwards)
awk -F, 'NR > 1 { c[$3]++ } END { for (k in c) print k, c[k] }' data/people.csv | sort
