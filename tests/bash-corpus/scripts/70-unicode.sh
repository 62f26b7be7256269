# UTF-8 text
grep unicode data/mixed.txt
echo "café" | wc -c
s="naïve"; echo ${#s}
