! The NAS Parallel Benchmarks' pseudorandom number generator (NAS RNR-94-007, section 2.2;
! NAS-95-020): the linear congruential generator x(k+1) = a * x(k) mod 2**46 with
! a = 5**13, returning x(k+1) * 2**-46 in (0, 1). The specification states it on doubles
! split into 23-bit halves; here the same exact arithmetic is done on 64-bit integers
! (every product of two 23-bit halves fits), so every compiler and flag gives the same
! sequence bit for bit.
module npb_random
  use, intrinsic :: iso_fortran_env, only: int64
  implicit none
  private
  public :: dp, randlc, vranlc, powmod46, mulmod46, r46, npb_a, npb_seed

  integer, parameter :: dp = kind(1.0d0)
  !> The multiplier a = 5**13 of every kernel.
  real(dp), parameter :: npb_a = 1220703125.0_dp
  !> The starting seed of CG, MG and FT (is.c spells the same for IS; EP has its own).
  real(dp), parameter :: npb_seed = 314159265.0_dp
  real(dp), parameter :: r46 = 0.5_dp**46
  integer(int64), parameter :: t23 = 2_int64**23, t46 = 2_int64**46

contains

  !> a * x mod 2**46 for 0 <= a, x < 2**46, exactly.
  pure elemental function mulmod46(a, x) result(r)
    integer(int64), intent(in) :: a, x
    integer(int64) :: r, a1, a2, x1, x2, z
    ! non-negative operands: shifts and masks are the divisions and remainders
    a1 = ishft(a, -23)
    a2 = iand(a, t23 - 1)
    x1 = ishft(x, -23)
    x2 = iand(x, t23 - 1)
    z = iand(a1 * x2 + a2 * x1, t23 - 1)
    r = iand(ishft(z, 23) + a2 * x2, t46 - 1)
  end function mulmod46

  !> The next number of the sequence: x is replaced by a * x mod 2**46 and 2**-46 * x returned.
  function randlc(x, a) result(r)
    real(dp), intent(inout) :: x
    real(dp), intent(in) :: a
    real(dp) :: r
    x = real(mulmod46(int(a, int64), int(x, int64)), dp)
    r = r46 * x
  end function randlc

  !> The next n numbers of the sequence into y(1:n); x is left at the last seed.
  subroutine vranlc(n, x, a, y)
    integer, intent(in) :: n
    real(dp), intent(inout) :: x
    real(dp), intent(in) :: a
    real(dp), intent(out) :: y(*)
    integer(int64) :: ia, ix
    integer :: i
    ia = int(a, int64)
    ix = int(x, int64)
    do i = 1, n
      ix = mulmod46(ia, ix)
      y(i) = r46 * real(ix, dp)
    end do
    x = real(ix, dp)
  end subroutine vranlc

  !> a**e mod 2**46 (a jump of e places in the sequence), by repeated squaring.
  function powmod46(a, e) result(r)
    real(dp), intent(in) :: a
    integer(int64), intent(in) :: e
    real(dp) :: r
    integer(int64) :: q, acc, n
    q = int(a, int64)
    acc = 1
    n = e
    do while (n > 0)
      if (mod(n, 2_int64) == 1) acc = mulmod46(acc, q)
      q = mulmod46(q, q)
      n = n / 2
    end do
    r = real(acc, dp)
  end function powmod46

end module npb_random
