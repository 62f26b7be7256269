# sort by a field
tail -n +2 data/people.csv | sort -t, -k2,2n | cut -d, -f1
tail -n +2 data/people.csv | sort -t, -k3,3 -k1,1r | head -3
