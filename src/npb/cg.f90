! CG, the conjugate gradient kernel (NAS RNR-94-007 section 2.5; NPB 3 classes): the
! smallest eigenvalue of a random sparse symmetric positive definite matrix by inverse
! power iteration, each step solving A z = x with 25 unpreconditioned CG iterations;
! zeta = shift + 1 / (x . z) is verified.
!
! The matrix is the specification's: A = sum_i size_i * v_i v_i^T + (rcond - shift) I with
! v_i a random sparse vector (nonzer entries from the generator, and 0.5 at i), size_i =
! rcond**((i-1)/n). Every rank draws the whole sequence and keeps its block of rows, adding
! duplicate entries in the order the specification does. Rows are split in contiguous
! blocks; p and z are gathered whole for each product, dot products are reduced.
module npb_cg
  use npb_random, only: randlc, npb_a, npb_seed
  use npb_common
  implicit none
  private
  public :: cg_run

  real(dp), parameter :: rcond = 0.1_dp, eps = 1.0e-10_dp
  integer, parameter :: cgitmax = 25

  ! this rank's rows lo..hi in compressed sparse rows (global column numbers)
  integer :: n, lo, hi, nloc
  integer, allocatable :: rowstr(:), colidx(:), counts(:), displs(:)
  real(dp), allocatable :: a(:)

contains

  subroutine cg_class(cls, na, nonzer, niter, shift, zeta_ref)
    character, intent(in) :: cls
    integer, intent(out) :: na, nonzer, niter
    real(dp), intent(out) :: shift, zeta_ref
    select case (cls)
    case ('S')
      na = 1400; nonzer = 7; niter = 15; shift = 10; zeta_ref = 8.5971775078648_dp
    case ('W')
      na = 7000; nonzer = 8; niter = 15; shift = 12; zeta_ref = 10.362595087124_dp
    case ('A')
      na = 14000; nonzer = 11; niter = 15; shift = 20; zeta_ref = 17.130235054029_dp
    case ('B')
      na = 75000; nonzer = 13; niter = 75; shift = 60; zeta_ref = 22.712745482631_dp
    case default
      call npb_abort('CG: unknown class '//cls)
    end select
  end subroutine cg_class

  !> The random sparse vector of outer product i: nonzer distinct positions (value, place
  !> from the generator), then 0.5 at position i (replacing the value there if drawn).
  subroutine sprnvc(i, nonzer, nn1, tran, v, iv, nzv)
    integer, intent(in) :: i, nonzer, nn1
    real(dp), intent(inout) :: tran
    real(dp), intent(out) :: v(:)
    integer, intent(out) :: iv(:), nzv
    real(dp) :: vecelt, vecloc
    integer :: j
    nzv = 0
    do while (nzv < nonzer)
      vecelt = randlc(tran, npb_a)
      vecloc = randlc(tran, npb_a)
      j = int(nn1 * vecloc) + 1
      if (j > n) cycle
      if (any(iv(1:nzv) == j)) cycle
      nzv = nzv + 1
      v(nzv) = vecelt
      iv(nzv) = j
    end do
    do j = 1, nzv
      if (iv(j) == i) then
        v(j) = 0.5_dp
        return
      end if
    end do
    nzv = nzv + 1
    v(nzv) = 0.5_dp
    iv(nzv) = i
  end subroutine sprnvc

  subroutine makea(nonzer, shift)
    integer, intent(in) :: nonzer
    real(dp), intent(in) :: shift
    integer :: nn1, i, j, k, r, q, nz, pos, nzv
    integer, allocatable :: arow(:), acol(:, :), fill(:), ecol(:), rcol(:)
    real(dp), allocatable :: aelt(:, :), eval(:), rval(:)
    real(dp) :: tran, dummy, size, ratio, scale, va
    nn1 = 1
    do while (nn1 < n)
      nn1 = 2 * nn1
    end do
    allocate (arow(n), acol(nonzer + 1, n), aelt(nonzer + 1, n))
    tran = npb_seed
    dummy = randlc(tran, npb_a)
    do i = 1, n
      call sprnvc(i, nonzer, nn1, tran, aelt(:, i), acol(:, i), nzv)
      arow(i) = nzv
    end do
    ! every contribution to this rank's rows, bucketed by row in the order of i
    allocate (fill(lo:hi + 1))
    fill = 0
    do i = 1, n
      do k = 1, arow(i)
        j = acol(k, i)
        if (j >= lo .and. j <= hi) fill(j + 1) = fill(j + 1) + arow(i)
      end do
    end do
    fill(lo) = 1
    do j = lo + 1, hi + 1
      fill(j) = fill(j) + fill(j - 1)
    end do
    nz = fill(hi + 1) - 1
    allocate (ecol(nz), eval(nz))
    size = 1
    ratio = rcond**(1.0_dp / real(n, dp))
    do i = 1, n
      do k = 1, arow(i)
        j = acol(k, i)
        scale = size * aelt(k, i)
        if (j < lo .or. j > hi) cycle
        do r = 1, arow(i)
          va = aelt(r, i) * scale
          if (acol(r, i) == j .and. j == i) va = va + rcond - shift
          ecol(fill(j)) = acol(r, i)
          eval(fill(j)) = va
          fill(j) = fill(j) + 1
        end do
      end do
      size = size * ratio
    end do
    ! rows: duplicates summed in the order they came, columns ascending
    allocate (rowstr(lo:hi + 1), colidx(nz), a(nz), rcol(n), rval(n))
    rowstr(lo) = 1
    pos = 1
    q = 1
    do j = lo, hi
      nzv = 0
      do k = q, fill(j) - 1
        r = findloc(rcol(1:nzv), ecol(k), dim=1)
        if (r == 0) then
          nzv = nzv + 1
          rcol(nzv) = ecol(k)
          rval(nzv) = eval(k)
        else
          rval(r) = rval(r) + eval(k)
        end if
      end do
      q = fill(j)
      call sort_row(rcol(1:nzv), rval(1:nzv))
      colidx(pos:pos + nzv - 1) = rcol(1:nzv)
      a(pos:pos + nzv - 1) = rval(1:nzv)
      pos = pos + nzv
      rowstr(j + 1) = pos
    end do
  end subroutine makea

  subroutine sort_row(c, v)
    integer, intent(inout) :: c(:)
    real(dp), intent(inout) :: v(:)
    integer :: i, k, ct
    real(dp) :: vt
    do i = 2, size(c)
      ct = c(i)
      vt = v(i)
      k = i - 1
      do while (k >= 1)
        if (c(k) <= ct) exit
        c(k + 1) = c(k)
        v(k + 1) = v(k)
        k = k - 1
      end do
      c(k + 1) = ct
      v(k + 1) = vt
    end do
  end subroutine sort_row

  !> y(lo:hi) = A(lo:hi, :) x (vectors of length n, this rank's rows set)
  subroutine matvec(x, y)
    real(dp), intent(in) :: x(:)
    real(dp), intent(inout) :: y(:)
    integer :: j, k
    real(dp) :: s
    do j = lo, hi
      s = 0
      do k = rowstr(j), rowstr(j + 1) - 1
        s = s + a(k) * x(colidx(k))
      end do
      y(j) = s
    end do
  end subroutine matvec

  subroutine gather(v)
    real(dp), intent(inout) :: v(:)
    integer :: ierr
    call mpi_allgatherv(mpi_in_place, 0, mpi_double_precision, v, counts, displs, &
                        mpi_double_precision, comm, ierr)
  end subroutine gather

  function dot(x, y) result(s)
    real(dp), intent(in) :: x(:), y(:)
    real(dp) :: s, mine
    integer :: ierr
    mine = sum(x(lo:hi) * y(lo:hi))
    call mpi_allreduce(mine, s, 1, mpi_double_precision, mpi_sum, comm, ierr)
  end function dot

  !> 25 CG iterations on A z = x from z = 0; rnorm = ||x - A z||.
  subroutine conj_grad(x, z, p, q, r, rnorm)
    real(dp), intent(in) :: x(:)
    real(dp), intent(inout) :: z(:), p(:), q(:), r(:)
    real(dp), intent(out) :: rnorm
    real(dp) :: rho, rho0, d, alpha, beta
    integer :: it
    q = 0
    z = 0
    r = x
    p = r
    call gather(p)
    rho = dot(r, r)
    do it = 1, cgitmax
      call matvec(p, q)
      d = dot(p, q)
      alpha = rho / d
      rho0 = rho
      z(lo:hi) = z(lo:hi) + alpha * p(lo:hi)
      r(lo:hi) = r(lo:hi) - alpha * q(lo:hi)
      rho = dot(r, r)
      beta = rho / rho0
      p(lo:hi) = r(lo:hi) + beta * p(lo:hi)
      call gather(p)
    end do
    call gather(z)
    call matvec(z, r)
    q(lo:hi) = x(lo:hi) - r(lo:hi)
    rnorm = sqrt(dot(q, q))
  end subroutine conj_grad

  subroutine cg_run(cls)
    character, intent(in) :: cls
    integer :: na, nonzer, niter, it, k, ierr
    real(dp) :: shift, zeta_ref, zeta, rnorm, nt(2), ntg(2), t, mops
    real(dp), allocatable :: x(:), z(:), p(:), q(:), r(:)
    logical :: ok

    call cg_class(cls, na, nonzer, niter, shift, zeta_ref)
    n = na
    lo = (n * me) / nprocs + 1
    hi = (n * (me + 1)) / nprocs
    nloc = hi - lo + 1
    allocate (counts(nprocs), displs(nprocs))
    do k = 0, nprocs - 1
      displs(k + 1) = (n * k) / nprocs
      counts(k + 1) = (n * (k + 1)) / nprocs - displs(k + 1)
    end do
    call makea(nonzer, shift)
    allocate (x(n), z(n), p(n), q(n), r(n))

    ! one untimed iteration (the specification's warm-up), then from x = 1 again
    x = 1
    call conj_grad(x, z, p, q, r, rnorm)
    x = 1
    zeta = 0
    call timed_start()
    do it = 1, niter
      call conj_grad(x, z, p, q, r, rnorm)
      nt(1) = sum(x(lo:hi) * z(lo:hi))
      nt(2) = sum(z(lo:hi) * z(lo:hi))
      call mpi_allreduce(nt, ntg, 2, mpi_double_precision, mpi_sum, comm, ierr)
      zeta = shift + 1.0_dp / ntg(1)
      if (me == 0) write (*, '(4x,i5,7x,es20.14,es20.13)') it, rnorm, zeta
      x(lo:hi) = (1.0_dp / sqrt(ntg(2))) * z(lo:hi)
    end do
    t = timed_stop()

    mops = 2.0_dp * niter * na * (3.0_dp + nonzer * (nonzer + 1) + 25.0_dp &
                                  * (5.0_dp + nonzer * (nonzer + 1)) + 3.0_dp) / t / 1.0e6_dp
    ok = .true.
    call check_rel('cg_zeta', zeta, zeta_ref, eps, ok)
    call report_head('CG', cls)
    if (me == 0) then
      write (*, '(" Size = ",i0,"  nonzeros (this rank) = ",i0)') na, rowstr(hi + 1) - 1
      write (*, '(" Zeta = ",es22.13e3)') zeta
    end if
    call put('cg_zeta', zeta)
    call put('cg_rnorm', rnorm)
    call report_tail('cg', t, mops, ok)
    deallocate (rowstr, colidx, a, counts, displs)
  end subroutine cg_run

end module npb_cg
