# tee writes a copy
echo "teed line" | tee t1.txt | tr a-z A-Z
cat t1.txt
