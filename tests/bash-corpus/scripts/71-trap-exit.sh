# trap on EXIT
trap 'echo cleanup' EXIT
echo working
