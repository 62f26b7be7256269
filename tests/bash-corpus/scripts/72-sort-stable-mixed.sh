# sort of mixed case and whitespace
# known: sort collates case-insensitively first (aAbB) even with LC_ALL=C; GNU C.UTF-8 sorts by byte
sort data/mixed.txt
