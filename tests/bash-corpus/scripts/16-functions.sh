# functions, local variables, return codes
greet() { local who=${1:-nobody}; echo "hi $who"; }
is_even() { return $(( $1 % 2 )); }
greet alice
greet
for n in 3 4; do if is_even $n; then echo "$n even"; else echo "$n odd"; fi; done
