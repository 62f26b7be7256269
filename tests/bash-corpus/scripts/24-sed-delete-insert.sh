# sed d, a, i commands
printf '1\n2\n3\n' | sed '2d'
printf '1\n2\n' | sed '1a\
after one'
printf 'x\n' | sed 's/x/y/;s/y/z/'
