# ls of a missing path: message and status
ls data/nope.txt
echo "status $?"
