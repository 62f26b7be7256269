# sed s with groups and a line range
sed -n '2,4p' notes.txt
sed -E 's/^([a-z]+)$/[\1]/' data/words.txt | head -2
sed 's/TODO/DONE/' README.md | grep DONE
