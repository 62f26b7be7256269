# > overwrites a file
echo first > out.txt
echo second > out.txt
cat out.txt
