# sed -i edits a file in place
cp notes.txt copy.txt
sed -i 's/a/A/g' copy.txt
head -3 copy.txt
sed -i '/^b/d' copy.txt
wc -l < copy.txt
