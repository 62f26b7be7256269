# parameter expansion
p=src/lib/helpers.js
echo "${p##*/} ${p%/*} ${p%.js} ${#p}"
s="Hello World"
echo "${s,,} ${s^^} ${s/World/There} ${s:6:3}"
echo "${unset:-default} ${unset:+x}"
