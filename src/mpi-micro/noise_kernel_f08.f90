! The system-noise kernel in Fortran 2008 with the mpi_f08 bindings (the default build).
! Bit-identical to the C kernel in noise_kernel_c.c: only shifts and xors on 64-bit
! integers (no overflow), the same contributions and the same digest, so the two builds
! share one reference checksum.
!
! For each of `outer` iterations: `inner` timed repetitions of a fixed sequential loop
! (`work` xorshift steps), then four MPI_Allreduce (SUM, BXOR, MAX, MIN) whose results are
! checked against the values computed locally from every rank's contribution.
module mm_noise_f08
  use, intrinsic :: iso_c_binding, only: c_int, c_int64_t, c_double
  use, intrinsic :: iso_fortran_env, only: int64
  use mpi_f08
  implicit none
  private
  public :: mm_noise_kernel

contains

  pure function xorshift(x) result(y)
    integer(int64), intent(in) :: x
    integer(int64) :: y
    y = ieor(x, ishft(x, 13))
    y = ieor(y, ishft(y, -7))
    y = ieor(y, ishft(y, 17))
  end function xorshift

  pure function seed_of(seed, rank, outer, inner, k) result(x)
    integer(int64), intent(in) :: seed
    integer, intent(in) :: rank, outer, inner, k
    integer(int64) :: x
    integer :: i
    x = ieor(ieor(ieor(ieor(seed, ishft(int(rank, int64), 40)), ishft(int(outer, int64), 20)), &
             ishft(int(inner, int64), 4)), int(k, int64))
    if (x == 0_int64) x = 2685821657736338717_int64
    do i = 1, 4
      x = xorshift(x)
    end do
  end function seed_of

  pure function contribution(seed, rank, outer, k) result(c)
    integer(int64), intent(in) :: seed
    integer, intent(in) :: rank, outer, k
    integer(int64) :: c
    c = seed_of(seed, rank, outer, 65535, k)
    if (k == 1) c = iand(c, 65535_int64)
  end function contribution

  pure function fold(d, v) result(e)
    integer(int64), intent(in) :: d, v
    integer(int64) :: e
    e = xorshift(ieor(ishftc(d, 5), v))
  end function fold

  subroutine mm_noise_kernel(fcomm, outer, inner, work, seed, corrupt, times, errors, digest) &
      bind(C, name='mm_noise_kernel')
    integer(c_int), value, intent(in) :: fcomm, outer, inner, corrupt
    integer(c_int64_t), value, intent(in) :: work, seed
    real(c_double), intent(out) :: times(inner, outer)
    integer(c_int64_t), intent(out) :: errors, digest
    type(MPI_Comm) :: comm
    type(MPI_Op) :: ops(4)
    integer :: rank, nranks, i, j, k, r
    integer(int64) :: x, w, c, res, expect, v, d, bad
    real(c_double) :: t0

    comm%MPI_VAL = fcomm
    call MPI_Comm_rank(comm, rank)
    call MPI_Comm_size(comm, nranks)
    ops = [MPI_SUM, MPI_BXOR, MPI_MAX, MPI_MIN]
    d = 0
    bad = 0
    do j = 0, outer - 1
      do i = 0, inner - 1
        x = seed_of(seed, rank, j, i, 0)
        t0 = MPI_Wtime()
        do w = 1, work
          x = xorshift(x)
        end do
        times(i + 1, j + 1) = MPI_Wtime() - t0
        d = fold(d, x)
      end do
      do k = 1, 4
        c = contribution(seed, rank, j, k)
        call MPI_Allreduce(c, res, 1, MPI_INT64_T, ops(k), comm)
        if (corrupt /= 0 .and. j == 0 .and. k == 1) res = ieor(res, 1_int64)
        expect = contribution(seed, 0, j, k)
        do r = 1, nranks - 1
          v = contribution(seed, r, j, k)
          select case (k)
          case (1)
            expect = expect + v
          case (2)
            expect = ieor(expect, v)
          case (3)
            expect = max(expect, v)
          case (4)
            expect = min(expect, v)
          end select
        end do
        if (res /= expect) bad = bad + 1
        d = fold(d, res)
      end do
    end do
    errors = bad
    digest = d
  end subroutine mm_noise_kernel

end module mm_noise_f08
