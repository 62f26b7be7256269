# arithmetic expansion and let
a=17; b=5
echo $((a + b)) $((a - b)) $((a * b)) $((a / b)) $((a % b)) $((a ** 2))
let c=a*2+1; echo $c
echo $(( (a > b) ? a : b )) $((0x1f)) $((8#17)) $((1 << 4))
x=5; ((x++)); ((x += 10)); echo $x
