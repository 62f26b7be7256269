# set -u makes an unset variable an error
set -u
echo "start"
echo "$undefined_var"
echo "not reached"
