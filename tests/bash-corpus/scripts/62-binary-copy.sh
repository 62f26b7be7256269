# binary files survive cp and cat
# known: od ignores -t x1 and prints octal
cp bin.dat copy.dat
cat bin.dat > cat.dat
od -An -tx1 copy.dat
wc -c cat.dat
