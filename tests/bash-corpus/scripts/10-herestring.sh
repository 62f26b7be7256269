# here-string
tr a-z A-Z <<< "shout this"
read -r a b <<< "first second third"
echo "$a|$b"
