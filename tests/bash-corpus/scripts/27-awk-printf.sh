# awk printf and NF
awk '{ printf "%-6s|%3d\n", $3, NF }' logs/app.log | head -4
awk 'length($0) > 5' notes.txt | wc -l
