# && and || chains
[ -f notes.txt ] && echo "notes exists"
[ -f nope.txt ] || echo "nope missing"
false && echo no || echo fallback
