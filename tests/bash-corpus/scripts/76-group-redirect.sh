# { } group with one redirect, then read back
{
  echo "header"
  seq 1 3
} > grouped.txt
cat -n grouped.txt
