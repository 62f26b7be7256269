# C-style for loop with arithmetic
total=0
for ((i = 1; i <= 10; i++)); do total=$((total + i * i)); done
echo "sum of squares: $total"
