# [[ ]] and test operators
[[ -d src && -f src/main.py ]] && echo "layout ok"
[[ "abc" == a* ]] && echo "glob match"
[[ "2026-11-30" =~ ^([0-9]{4})-([0-9]{2}) ]] && echo "year ${BASH_REMATCH[1]} month ${BASH_REMATCH[2]}"
[ -s data/empty.txt ] || echo "empty.txt is empty"
[ 10 -lt 9 ] || echo "numeric compare"
