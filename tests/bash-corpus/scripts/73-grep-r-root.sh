# grep -r from the workspace root
# known: grep -r . drops the leading "./" from file names
grep -rn TODO . | sort
