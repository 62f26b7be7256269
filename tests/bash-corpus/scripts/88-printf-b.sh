# printf %b and echo -e escapes
printf '%b\n' 'tab:\there'
echo -e 'a\tb\nc'
echo -n "no newline"; echo "|"
