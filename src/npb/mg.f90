! MG, the multigrid kernel (NAS RNR-94-007 section 2.4; NPB 3 classes): four (class B:
! twenty) V-cycles on the 3-D Poisson problem del^2 u = v with periodic boundaries on an
! n**3 grid; v is zero but +1 at the ten largest and -1 at the ten smallest of n**3 numbers
! from the generator. The operators are the specification's 27-point stencils A (residual),
! S (smoother, coefficients c), P (restriction) and Q (trilinear prolongation); the L2 norm
! of the final residual is verified.
!
! Levels k = 1 (2**3 points) .. lt (n**3); arrays carry one ghost layer on every side
! (index 0 and m-1, m = 2**k + 2). A level with at least as many planes as ranks is split
! in z slabs, ghost planes exchanged with the neighbours; a coarser one is held whole by
! every rank (gathered once on the way down).
module npb_mg
  use, intrinsic :: iso_fortran_env, only: int64
  use npb_random, only: vranlc, randlc, powmod46, npb_a, npb_seed
  use npb_common
  implicit none
  private
  public :: mg_run

  real(dp), parameter :: eps = 1.0e-8_dp
  type level
    real(dp), allocatable :: u(:, :, :), r(:, :, :)
    integer :: m = 0, ng = 0, nl = 0, z0 = 0
    logical :: split = .false.
  end type level
  type(level), allocatable :: lv(:)
  real(dp), allocatable :: v(:, :, :)
  real(dp) :: ca(0:3), cc(0:3)
  integer :: lt

contains

  subroutine mg_class(cls, n, nit, ref)
    character, intent(in) :: cls
    integer, intent(out) :: n, nit
    real(dp), intent(out) :: ref
    select case (cls)
    case ('S')
      n = 32; nit = 4; ref = 0.5307707005734e-04_dp
    case ('W')
      n = 128; nit = 4; ref = 0.6467329375339e-05_dp
    case ('A')
      n = 256; nit = 4; ref = 0.2433365309069e-05_dp
    case ('B')
      n = 256; nit = 20; ref = 0.1800564401355e-05_dp
    case default
      call npb_abort('MG: unknown class '//cls)
    end select
  end subroutine mg_class

  subroutine setup(n)
    integer, intent(in) :: n
    integer :: k
    lt = nint(log(real(n, dp)) / log(2.0_dp))
    allocate (lv(lt))
    do k = 1, lt
      associate (l => lv(k))
        l%ng = 2**k
        l%m = l%ng + 2
        l%split = l%ng >= nprocs
        if (l%split) then
          l%nl = l%ng / nprocs
          l%z0 = me * l%nl
        else
          l%nl = l%ng
          l%z0 = 0
        end if
        allocate (l%u(0:l%m - 1, 0:l%m - 1, 0:l%nl + 1), l%r(0:l%m - 1, 0:l%m - 1, 0:l%nl + 1))
      end associate
    end do
    associate (l => lv(lt))
      allocate (v(0:l%m - 1, 0:l%m - 1, 0:l%nl + 1))
    end associate
  end subroutine setup

  !> Periodic ghost layers: x and y on this rank, z from the neighbouring slabs.
  subroutine comm3(u, k)
    real(dp), intent(inout) :: u(0:, 0:, 0:)
    integer, intent(in) :: k
    integer :: m, nl, up, down, ierr, cnt, st(mpi_status_size)
    m = lv(k)%m
    nl = lv(k)%nl
    u(0, 1:m - 2, 1:nl) = u(m - 2, 1:m - 2, 1:nl)
    u(m - 1, 1:m - 2, 1:nl) = u(1, 1:m - 2, 1:nl)
    u(:, 0, 1:nl) = u(:, m - 2, 1:nl)
    u(:, m - 1, 1:nl) = u(:, 1, 1:nl)
    if (lv(k)%split .and. nprocs > 1) then
      up = mod(me + 1, nprocs)
      down = mod(me - 1 + nprocs, nprocs)
      cnt = m * m
      call mpi_sendrecv(u(:, :, nl), cnt, mpi_double_precision, up, 1, &
                        u(:, :, 0), cnt, mpi_double_precision, down, 1, comm, st, ierr)
      call mpi_sendrecv(u(:, :, 1), cnt, mpi_double_precision, down, 2, &
                        u(:, :, nl + 1), cnt, mpi_double_precision, up, 2, comm, st, ierr)
    else
      u(:, :, 0) = u(:, :, nl)
      u(:, :, nl + 1) = u(:, :, 1)
    end if
  end subroutine comm3

  !> r = v - A u (with inplace: r = r - A u), then the ghost layers.
  subroutine resid(u, v, r, k, inplace)
    real(dp), intent(in) :: u(0:, 0:, 0:), v(0:, 0:, 0:)
    real(dp), intent(inout) :: r(0:, 0:, 0:)
    integer, intent(in) :: k
    logical, intent(in) :: inplace
    real(dp) :: u1(0:lv(k)%m - 1), u2(0:lv(k)%m - 1), c
    integer :: i1, i2, i3, m
    m = lv(k)%m
    do i3 = 1, lv(k)%nl
      do i2 = 1, m - 2
        do i1 = 0, m - 1
          u1(i1) = u(i1, i2 - 1, i3) + u(i1, i2 + 1, i3) + u(i1, i2, i3 - 1) + u(i1, i2, i3 + 1)
          u2(i1) = u(i1, i2 - 1, i3 - 1) + u(i1, i2 + 1, i3 - 1) &
                   + u(i1, i2 - 1, i3 + 1) + u(i1, i2 + 1, i3 + 1)
        end do
        do i1 = 1, m - 2
          if (inplace) then
            c = r(i1, i2, i3)
          else
            c = v(i1, i2, i3)
          end if
          r(i1, i2, i3) = c - ca(0) * u(i1, i2, i3) &
                          - ca(2) * (u2(i1) + u1(i1 - 1) + u1(i1 + 1)) &
                          - ca(3) * (u2(i1 - 1) + u2(i1 + 1))
        end do
      end do
    end do
    call comm3(r, k)
  end subroutine resid

  !> u = u + S r (the smoother), then the ghost layers.
  subroutine psinv(r, u, k)
    real(dp), intent(in) :: r(0:, 0:, 0:)
    real(dp), intent(inout) :: u(0:, 0:, 0:)
    integer, intent(in) :: k
    real(dp) :: r1(0:lv(k)%m - 1), r2(0:lv(k)%m - 1)
    integer :: i1, i2, i3, m
    m = lv(k)%m
    do i3 = 1, lv(k)%nl
      do i2 = 1, m - 2
        do i1 = 0, m - 1
          r1(i1) = r(i1, i2 - 1, i3) + r(i1, i2 + 1, i3) + r(i1, i2, i3 - 1) + r(i1, i2, i3 + 1)
          r2(i1) = r(i1, i2 - 1, i3 - 1) + r(i1, i2 + 1, i3 - 1) &
                   + r(i1, i2 - 1, i3 + 1) + r(i1, i2 + 1, i3 + 1)
        end do
        do i1 = 1, m - 2
          u(i1, i2, i3) = u(i1, i2, i3) + cc(0) * r(i1, i2, i3) &
                          + cc(1) * (r(i1 - 1, i2, i3) + r(i1 + 1, i2, i3) + r1(i1)) &
                          + cc(2) * (r2(i1) + r1(i1 - 1) + r1(i1 + 1))
        end do
      end do
    end do
    call comm3(u, k)
  end subroutine psinv

  !> s (level k-1) = P r (level k). A split fine level under a whole coarse one is gathered
  !> first.
  subroutine rprj3(k)
    integer, intent(in) :: k
    real(dp), allocatable :: full(:, :, :)
    integer :: ierr, mf, ngf
    if (lv(k)%split .and. .not. lv(k - 1)%split) then
      mf = lv(k)%m
      ngf = lv(k)%ng
      allocate (full(0:mf - 1, 0:mf - 1, 0:ngf + 1))
      call mpi_allgather(lv(k)%r(:, :, 1:lv(k)%nl), mf * mf * lv(k)%nl, mpi_double_precision, &
                         full(:, :, 1:ngf), mf * mf * lv(k)%nl, mpi_double_precision, comm, ierr)
      full(:, :, 0) = full(:, :, ngf)
      full(:, :, ngf + 1) = full(:, :, 1)
      call restrict(full, 0, lv(k - 1)%r, k - 1)
    else
      call restrict(lv(k)%r, lv(k)%z0, lv(k - 1)%r, k - 1)
    end if
    call comm3(lv(k - 1)%r, k - 1)
  end subroutine rprj3

  subroutine restrict(r, z0f, s, kc)
    real(dp), intent(in) :: r(0:, 0:, 0:)
    integer, intent(in) :: z0f, kc
    real(dp), intent(inout) :: s(0:, 0:, 0:)
    real(dp) :: x1(0:lv(kc + 1)%m - 1), y1(0:lv(kc + 1)%m - 1), x2, y2
    integer :: j1, j2, j3, i1, i2, i3, mj
    mj = lv(kc)%m
    do j3 = 1, lv(kc)%nl
      i3 = 2 * (lv(kc)%z0 + j3) - 1 - z0f
      do j2 = 1, mj - 2
        i2 = 2 * j2 - 1
        do j1 = 1, mj - 1
          i1 = 2 * j1 - 1
          x1(i1) = r(i1, i2, i3 + 1) + r(i1, i2 + 2, i3 + 1) + r(i1, i2 + 1, i3) + r(i1, i2 + 1, i3 + 2)
          y1(i1) = r(i1, i2, i3) + r(i1, i2, i3 + 2) + r(i1, i2 + 2, i3) + r(i1, i2 + 2, i3 + 2)
        end do
        do j1 = 1, mj - 2
          i1 = 2 * j1 - 1
          y2 = r(i1 + 1, i2, i3) + r(i1 + 1, i2, i3 + 2) + r(i1 + 1, i2 + 2, i3) + r(i1 + 1, i2 + 2, i3 + 2)
          x2 = r(i1 + 1, i2, i3 + 1) + r(i1 + 1, i2 + 2, i3 + 1) &
               + r(i1 + 1, i2 + 1, i3) + r(i1 + 1, i2 + 1, i3 + 2)
          s(j1, j2, j3) = 0.5_dp * r(i1 + 1, i2 + 1, i3 + 1) &
                          + 0.25_dp * (r(i1, i2 + 1, i3 + 1) + r(i1 + 2, i2 + 1, i3 + 1) + x2) &
                          + 0.125_dp * (x1(i1) + x1(i1 + 2) + y2) &
                          + 0.0625_dp * (y1(i1) + y1(i1 + 2))
        end do
      end do
    end do
  end subroutine restrict

  !> u (level k) = u + Q z (level k-1), ghost planes included (from the coarse ghosts).
  subroutine interp(k)
    integer, intent(in) :: k
    real(dp) :: z1(0:lv(k - 1)%m - 1), z2(0:lv(k - 1)%m - 1), z3(0:lv(k - 1)%m - 1)
    integer :: fl, gf, c, i1, i2, mm
    mm = lv(k - 1)%m
    associate (z => lv(k - 1)%u, u => lv(k)%u)
      do fl = 0, lv(k)%nl + 1
        gf = lv(k)%z0 + fl
        c = gf / 2 - lv(k - 1)%z0
        do i2 = 0, mm - 2
          z1(:) = z(:, i2 + 1, c) + z(:, i2, c)
          if (mod(gf, 2) == 0) then
            do i1 = 0, mm - 2
              u(2 * i1, 2 * i2, fl) = u(2 * i1, 2 * i2, fl) + z(i1, i2, c)
              u(2 * i1 + 1, 2 * i2, fl) = u(2 * i1 + 1, 2 * i2, fl) &
                                          + 0.5_dp * (z(i1 + 1, i2, c) + z(i1, i2, c))
            end do
            do i1 = 0, mm - 2
              u(2 * i1, 2 * i2 + 1, fl) = u(2 * i1, 2 * i2 + 1, fl) + 0.5_dp * z1(i1)
              u(2 * i1 + 1, 2 * i2 + 1, fl) = u(2 * i1 + 1, 2 * i2 + 1, fl) &
                                              + 0.25_dp * (z1(i1) + z1(i1 + 1))
            end do
          else
            z2(:) = z(:, i2, c + 1) + z(:, i2, c)
            z3(:) = z(:, i2 + 1, c + 1) + z(:, i2, c + 1) + z1(:)
            do i1 = 0, mm - 2
              u(2 * i1, 2 * i2, fl) = u(2 * i1, 2 * i2, fl) + 0.5_dp * z2(i1)
              u(2 * i1 + 1, 2 * i2, fl) = u(2 * i1 + 1, 2 * i2, fl) &
                                          + 0.25_dp * (z2(i1) + z2(i1 + 1))
            end do
            do i1 = 0, mm - 2
              u(2 * i1, 2 * i2 + 1, fl) = u(2 * i1, 2 * i2 + 1, fl) + 0.25_dp * z3(i1)
              u(2 * i1 + 1, 2 * i2 + 1, fl) = u(2 * i1 + 1, 2 * i2 + 1, fl) &
                                              + 0.125_dp * (z3(i1) + z3(i1 + 1))
            end do
          end if
        end do
      end do
    end associate
  end subroutine interp

  !> One V-cycle: restrict the residual to the coarsest level, smooth, and back up.
  subroutine mg3p()
    integer :: k
    do k = lt, 2, -1
      call rprj3(k)
    end do
    lv(1)%u = 0
    call psinv(lv(1)%r, lv(1)%u, 1)
    do k = 2, lt - 1
      lv(k)%u = 0
      call interp(k)
      call resid(lv(k)%u, lv(k)%r, lv(k)%r, k, .true.)
      call psinv(lv(k)%r, lv(k)%u, k)
    end do
    call interp(lt)
    call resid(lv(lt)%u, v, lv(lt)%r, lt, .false.)
    call psinv(lv(lt)%r, lv(lt)%u, lt)
  end subroutine mg3p

  !> sqrt(sum r**2 / n**3) over the grid.
  function norm2u3(r) result(rnm2)
    real(dp), intent(in) :: r(0:, 0:, 0:)
    real(dp) :: rnm2, s, st
    integer :: m, ierr
    m = lv(lt)%m
    s = sum(r(1:m - 2, 1:m - 2, 1:lv(lt)%nl)**2)
    if (lv(lt)%split) then
      call mpi_allreduce(s, st, 1, mpi_double_precision, mpi_sum, comm, ierr)
    else
      st = s
    end if
    rnm2 = sqrt(st / real(lv(lt)%ng, dp)**3)
  end function norm2u3

  !> v: zero but +1 at the ten largest and -1 at the ten smallest of the generated field
  !> (sequence of the common seed, x fastest, then y, then z).
  subroutine zran3()
    integer, parameter :: mm = 10
    integer :: n, m, nl, i1, i2, i3, i, ierr, g
    real(dp) :: a1, a2, x0, x1, xx, best(4, mm, 0:1), all(4, mm, 0:1, nprocs)
    real(dp), allocatable :: cand(:, :)
    n = lv(lt)%ng
    m = lv(lt)%m
    nl = lv(lt)%nl
    a1 = powmod46(npb_a, int(n, int64))
    a2 = powmod46(npb_a, int(n, int64) * n)
    v = 0
    x0 = npb_seed
    xx = randlc(x0, powmod46(npb_a, int(n, int64) * n * lv(lt)%z0))
    do i3 = 1, nl
      x1 = x0
      do i2 = 1, n
        xx = x1
        call vranlc(n, xx, npb_a, v(1:, i2, i3))
        xx = randlc(x1, a1)
      end do
      xx = randlc(x0, a2)
    end do
    ! this rank's ten largest (1) and ten smallest (0) with their global places
    best(1, :, 1) = -huge(1.0_dp)
    best(1, :, 0) = huge(1.0_dp)
    best(2:, :, :) = 0
    do i3 = 1, nl
      do i2 = 1, n
        do i1 = 1, n
          call keep(v(i1, i2, i3), 1, 1.0_dp)
          call keep(v(i1, i2, i3), 0, -1.0_dp)
        end do
      end do
    end do
    call mpi_allgather(best, 8 * mm, mpi_double_precision, all, 8 * mm, mpi_double_precision, &
                       comm, ierr)
    v = 0
    do g = 0, 1
      cand = reshape(all(:, :, g, :), [4, mm * nprocs])
      do i = 1, mm
        ! the next extreme among every rank's candidates
        i1 = merge(maxloc(cand(1, :), dim=1), minloc(cand(1, :), dim=1), g == 1)
        i3 = nint(cand(4, i1)) - lv(lt)%z0
        if (i3 >= 1 .and. i3 <= nl) v(nint(cand(2, i1)), nint(cand(3, i1)), i3) = merge(1, -1, g == 1)
        cand(1, i1) = merge(-huge(1.0_dp), huge(1.0_dp), g == 1)
      end do
    end do
    call comm3(v, lt)
  contains
    subroutine keep(x, g, sgn)
      real(dp), intent(in) :: x, sgn
      integer, intent(in) :: g
      integer :: j
      ! best(:, 1, g) is the least extreme kept; replace it and move it to its place
      if (sgn * x <= sgn * best(1, 1, g)) return
      best(:, 1, g) = [x, real(i1, dp), real(i2, dp), real(lv(lt)%z0 + i3, dp)]
      do j = 1, mm - 1
        if (sgn * best(1, j, g) <= sgn * best(1, j + 1, g)) exit
        best(:, j:j + 1, g) = best(:, [j + 1, j], g)
      end do
    end subroutine keep
  end subroutine zran3

  subroutine mg_run(cls)
    character, intent(in) :: cls
    integer :: n, nit, it
    real(dp) :: ref, rnm2, t, mops
    logical :: ok

    call mg_class(cls, n, nit, ref)
    if (.not. is_power_of_two(nprocs)) call npb_abort('MG needs a power-of-two number of ranks')
    ca = [-8.0_dp / 3.0_dp, 0.0_dp, 1.0_dp / 6.0_dp, 1.0_dp / 12.0_dp]
    if (cls == 'B') then
      cc = [-3.0_dp / 17.0_dp, 1.0_dp / 33.0_dp, -1.0_dp / 61.0_dp, 0.0_dp]
    else
      cc = [-3.0_dp / 8.0_dp, 1.0_dp / 32.0_dp, -1.0_dp / 64.0_dp, 0.0_dp]
    end if
    call setup(n)
    ! one untimed cycle (the specification's warm-up), then from the start again
    lv(lt)%u = 0
    call zran3()
    call resid(lv(lt)%u, v, lv(lt)%r, lt, .false.)
    call mg3p()
    call resid(lv(lt)%u, v, lv(lt)%r, lt, .false.)
    lv(lt)%u = 0
    call zran3()

    call timed_start()
    call resid(lv(lt)%u, v, lv(lt)%r, lt, .false.)
    rnm2 = norm2u3(lv(lt)%r)
    do it = 1, nit
      call mg3p()
      call resid(lv(lt)%u, v, lv(lt)%r, lt, .false.)
    end do
    rnm2 = norm2u3(lv(lt)%r)
    t = timed_stop()

    mops = 58.0_dp * nit * real(n, dp)**3 * 1.0e-6_dp / t
    ok = .true.
    call check_rel('mg_rnm2', rnm2, ref, eps, ok)
    call report_head('MG', cls)
    if (me == 0) then
      write (*, '(" Size = ",i0,"^3  Iterations = ",i0)') n, nit
      write (*, '(" L2 norm of the residual = ",es22.13e3)') rnm2
    end if
    call put('mg_rnm2', rnm2)
    call report_tail('mg', t, mops, ok)
    deallocate (lv, v)
  end subroutine mg_run

end module npb_mg
