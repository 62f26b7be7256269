# $? after commands
true; echo "true: $?"
false; echo "false: $?"
grep -q zzz notes.txt; echo "grep miss: $?"
(exit 7); echo "subshell: $?"
