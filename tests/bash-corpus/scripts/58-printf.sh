# printf formats
printf '%5s|%-5s|%05d|%.2f|%x|%o\n' ab cd 42 3.14159 255 8
printf '%s\n' one two three
printf '%%literal %c\n' xyz
