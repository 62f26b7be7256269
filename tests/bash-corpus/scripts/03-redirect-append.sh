# >> appends
echo one > log.txt
echo two >> log.txt
printf 'three\n' >> log.txt
cat log.txt
wc -l < log.txt
