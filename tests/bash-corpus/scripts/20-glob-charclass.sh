# ? and [] globs, no-match stays literal
echo data/[nw]*.txt
echo logs/???.log
echo nomatch/*.xyz
