# seq and expr
seq 3
seq 2 3 11 | tr '\n' ' '; echo
expr 6 \* 7
expr length "hello"
