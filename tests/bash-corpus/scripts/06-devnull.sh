# /dev/null swallows output
cat data/missing.txt 2>/dev/null || echo "missing (exit $?)"
echo kept > /dev/null; echo done
