# find from the workspace root
# known: sort collates case-insensitively first (aAbB) even with LC_ALL=C; GNU C.UTF-8 sorts by byte
find . -name '*.md' | sort
find . -type f -name '*.txt' | wc -l
