# set -e stops at the first failure
set -e
echo start
false
echo not reached
