# 2> sends stderr to a file; stdout stays
{ echo visible; echo hidden >&2; } 2> err.txt
echo "err file: $(cat err.txt)"
