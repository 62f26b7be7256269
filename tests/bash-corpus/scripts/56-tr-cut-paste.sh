# tr, cut, paste
echo "a-b-c" | tr '-' ' '
cut -d, -f1,3 data/people.csv | head -3
paste -d: <(head -3 notes.txt) <(head -3 data/words.txt)
echo "hello" | tr -d 'l'
