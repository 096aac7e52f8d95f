! EP, the embarrassingly parallel kernel (NAS RNR-94-007 section 2.3; NPB 3 classes):
! 2**(M+1) uniform numbers in pairs (x, y) -> (2x-1, 2y-1); pairs inside the unit circle
! give Gaussian deviates by the Marsaglia polar method, summed (sx, sy) and counted in the
! square annuli l <= max(|X|, |Y|) < l+1. Batches of 2**16 pairs are independent: batch k
! starts 2*2**16*k places into the sequence of seed 271828183.
module npb_ep
  use, intrinsic :: iso_fortran_env, only: int64
  use npb_random, only: vranlc, powmod46, mulmod46, npb_a
  use npb_common
  implicit none
  private
  public :: ep_run

  integer, parameter :: mk = 16, nk = 2**mk, nq = 10
  real(dp), parameter :: ep_seed = 271828183.0_dp, eps = 1.0e-8_dp

contains

  subroutine ep_class(cls, m, sx_ref, sy_ref)
    character, intent(in) :: cls
    integer, intent(out) :: m
    real(dp), intent(out) :: sx_ref, sy_ref
    select case (cls)
    case ('S')
      m = 24; sx_ref = -3.247834652034740e+3_dp; sy_ref = -6.958407078382297e+3_dp
    case ('W')
      m = 25; sx_ref = -2.863319731645753e+3_dp; sy_ref = -6.320053679109499e+3_dp
    case ('A')
      m = 28; sx_ref = -4.295875165629892e+3_dp; sy_ref = -1.580732573678431e+4_dp
    case ('B')
      m = 30; sx_ref = 4.033815542441498e+4_dp; sy_ref = -2.660669192809235e+4_dp
    case default
      call npb_abort('EP: unknown class '//cls)
    end select
  end subroutine ep_class

  subroutine ep_run(cls)
    character, intent(in) :: cls
    integer :: m, nn, k, klo, khi, i, l, ierr
    real(dp) :: sx_ref, sy_ref, an, t1, t2, t3, t4, x1, x2, tm, mops
    real(dp) :: sums(nq + 2), tot(nq + 2)
    real(dp), allocatable :: x(:)
    logical :: ok
    character(12) :: key

    call ep_class(cls, m, sx_ref, sy_ref)
    nn = 2**(m - mk)
    allocate (x(2 * nk))
    ! this rank's batches: a contiguous share of the nn batches
    klo = (nn * me) / nprocs
    khi = (nn * (me + 1)) / nprocs - 1

    call timed_start()
    an = powmod46(npb_a, int(2 * nk, int64))
    sums = 0
    do k = klo, khi
      ! the seed of batch k: 271828183 * a**(2*nk*k) mod 2**46
      t1 = real(mulmod46(int(ep_seed, int64), int(powmod46(an, int(k, int64)), int64)), dp)
      call vranlc(2 * nk, t1, npb_a, x)
      do i = 1, nk
        x1 = 2.0_dp * x(2 * i - 1) - 1.0_dp
        x2 = 2.0_dp * x(2 * i) - 1.0_dp
        t1 = x1 * x1 + x2 * x2
        if (t1 <= 1.0_dp) then
          t2 = sqrt(-2.0_dp * log(t1) / t1)
          t3 = x1 * t2
          t4 = x2 * t2
          l = int(max(abs(t3), abs(t4)))
          sums(3 + l) = sums(3 + l) + 1.0_dp
          sums(1) = sums(1) + t3
          sums(2) = sums(2) + t4
        end if
      end do
    end do
    call mpi_allreduce(sums, tot, nq + 2, mpi_double_precision, mpi_sum, comm, ierr)
    tm = timed_stop()

    mops = 2.0_dp**(m + 1) / tm / 1.0e6_dp
    ok = .true.
    call check_rel('ep_sx', tot(1), sx_ref, eps, ok)
    call check_rel('ep_sy', tot(2), sy_ref, eps, ok)
    call report_head('EP', cls)
    if (me == 0) then
      write (*, '(" N = 2^",i0,"  Gaussian pairs = ",i0)') m + 1, nint(sum(tot(3:)))
      write (*, '(" Sums = ",2es25.15e3)') tot(1), tot(2)
    end if
    call put('ep_sx', tot(1))
    call put('ep_sy', tot(2))
    call put_int('ep_pairs', nint(sum(tot(3:))))
    do l = 0, nq - 1
      write (key, '("ep_q",i0)') l
      call put_int(trim(key), nint(tot(3 + l)))
    end do
    call report_tail('ep', tm, mops, ok)
  end subroutine ep_run

end module npb_ep
