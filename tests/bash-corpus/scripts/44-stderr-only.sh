# writes to stderr and fails
echo "problem" >&2
exit 1
