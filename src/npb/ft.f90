! FT, the 3-D FFT PDE kernel (NAS RNR-94-007 section 2.6; NPB 3 classes): the heat equation
! u_t = alpha del^2 u on a periodic nx*ny*nz grid solved spectrally. The initial field is
! the generator's sequence (seed 314159265, real and imaginary parts in turn, x fastest);
! it is transformed once, then each iteration t multiplies by exp(-4 alpha pi^2 |k|^2 t)
! and transforms back; the checksum of 1024 specified elements, divided by nx*ny*nz, is
! verified per iteration.
!
! Data: z slabs (nx, ny, nz/P) for the x and y transforms, y slabs (nx, ny/P, nz) for the z
! transform, swapped with one all-to-all. The 1-D transforms are radix-2 on lines copied into
! a contiguous buffer; the inverse is not normalised (as specified).
module npb_ft
  use, intrinsic :: iso_fortran_env, only: int64
  use npb_random, only: vranlc, randlc, powmod46, npb_a, npb_seed
  use npb_common
  implicit none
  private
  public :: ft_run

  real(dp), parameter :: alpha = 1.0e-6_dp, eps = 1.0e-12_dp
  real(dp), parameter :: pi = 3.141592653589793238_dp
  integer, parameter :: blk = 16
  integer :: nx, ny, nz, nzl, nyl
  complex(dp), allocatable :: sbuf(:), rbuf(:)

contains

  subroutine ft_class(cls, niter, ref)
    character, intent(in) :: cls
    integer, intent(out) :: niter
    complex(dp), allocatable, intent(out) :: ref(:)
    select case (cls)
    case ('S')
      nx = 64; ny = 64; nz = 64; niter = 6
      ref = [(5.546087004964e+02_dp, 4.845363331978e+02_dp), &
             (5.546385409189e+02_dp, 4.865304269511e+02_dp), &
             (5.546148406171e+02_dp, 4.883910722336e+02_dp), &
             (5.545423607415e+02_dp, 4.901273169046e+02_dp), &
             (5.544255039624e+02_dp, 4.917475857993e+02_dp), &
             (5.542683411902e+02_dp, 4.932597244941e+02_dp)]
    case ('W')
      nx = 128; ny = 128; nz = 32; niter = 6
      ref = [(5.673612178944e+02_dp, 5.293246849175e+02_dp), &
             (5.631436885271e+02_dp, 5.282149986629e+02_dp), &
             (5.594024089970e+02_dp, 5.270996558037e+02_dp), &
             (5.560698047020e+02_dp, 5.260027904925e+02_dp), &
             (5.530898991250e+02_dp, 5.249400845633e+02_dp), &
             (5.504159734538e+02_dp, 5.239212247086e+02_dp)]
    case ('A')
      nx = 256; ny = 256; nz = 128; niter = 6
      ref = [(5.046735008193e+02_dp, 5.114047905510e+02_dp), &
             (5.059412319734e+02_dp, 5.098809666433e+02_dp), &
             (5.069376896287e+02_dp, 5.098144042213e+02_dp), &
             (5.077892868474e+02_dp, 5.101336130759e+02_dp), &
             (5.085233095391e+02_dp, 5.104914655194e+02_dp), &
             (5.091487099959e+02_dp, 5.107917842803e+02_dp)]
    case ('B')
      nx = 512; ny = 256; nz = 256; niter = 20
      ref = [(5.177643571579e+02_dp, 5.077803458597e+02_dp), &
             (5.154521291263e+02_dp, 5.088249431599e+02_dp), &
             (5.146409228649e+02_dp, 5.096208912659e+02_dp), &
             (5.142378756213e+02_dp, 5.101023387619e+02_dp), &
             (5.139626667737e+02_dp, 5.103976610617e+02_dp), &
             (5.137423460082e+02_dp, 5.105948019802e+02_dp), &
             (5.135547056878e+02_dp, 5.107404165783e+02_dp), &
             (5.133910925466e+02_dp, 5.108576573661e+02_dp), &
             (5.132470705390e+02_dp, 5.109577278523e+02_dp), &
             (5.131197729984e+02_dp, 5.110460304483e+02_dp), &
             (5.130070319283e+02_dp, 5.111252433800e+02_dp), &
             (5.129070537032e+02_dp, 5.111968077718e+02_dp), &
             (5.128182883502e+02_dp, 5.112616233064e+02_dp), &
             (5.127393733383e+02_dp, 5.113203605551e+02_dp), &
             (5.126691062020e+02_dp, 5.113735928093e+02_dp), &
             (5.126064276004e+02_dp, 5.114218460548e+02_dp), &
             (5.125504076570e+02_dp, 5.114656139760e+02_dp), &
             (5.125002331720e+02_dp, 5.115053595966e+02_dp), &
             (5.124551951846e+02_dp, 5.115415130407e+02_dp), &
             (5.124146770029e+02_dp, 5.115744692211e+02_dp)]
    case default
      call npb_abort('FT: unknown class '//cls)
    end select
  end subroutine ft_class

  !> In-place radix-2 transform of each column of y(0:n-1, :), exp(sgn 2 pi i jk / n).
  subroutine fft_lines(y, n, sgn)
    integer, intent(in) :: n, sgn
    complex(dp), intent(inout) :: y(0:, :)
    complex(dp) :: w(0:n / 2 - 1), t, tmp
    integer :: i, j, k, len, half, step, col
    do k = 0, n / 2 - 1
      w(k) = cmplx(cos(2 * pi * k / n), sgn * sin(2 * pi * k / n), dp)
    end do
    do col = 1, size(y, 2)
      j = 0
      do i = 0, n - 2
        if (i < j) then
          tmp = y(i, col); y(i, col) = y(j, col); y(j, col) = tmp
        end if
        k = n / 2
        do while (k <= j)
          j = j - k
          k = k / 2
        end do
        j = j + k
      end do
      len = 2
      do while (len <= n)
        half = len / 2
        step = n / len
        do i = 0, n - 1, len
          do k = 0, half - 1
            t = w(k * step) * y(i + k + half, col)
            y(i + k + half, col) = y(i + k, col) - t
            y(i + k, col) = y(i + k, col) + t
          end do
        end do
        len = 2 * len
      end do
    end do
  end subroutine fft_lines

  !> Transforms along x and y of z slabs a(nx, ny, nzl).
  subroutine fft_xy(a, sgn)
    complex(dp), intent(inout) :: a(0:, 0:, 0:)
    integer, intent(in) :: sgn
    complex(dp) :: buf(0:max(nx, ny) - 1, blk)
    integer :: k, j, i, b
    do k = 0, nzl - 1
      do j = 0, ny - 1, blk
        b = min(blk, ny - j)
        buf(0:nx - 1, 1:b) = a(:, j:j + b - 1, k)
        call fft_lines(buf(0:nx - 1, 1:b), nx, sgn)
        a(:, j:j + b - 1, k) = buf(0:nx - 1, 1:b)
      end do
      do i = 0, nx - 1, blk
        b = min(blk, nx - i)
        buf(0:ny - 1, 1:b) = transpose(a(i:i + b - 1, :, k))
        call fft_lines(buf(0:ny - 1, 1:b), ny, sgn)
        a(i:i + b - 1, :, k) = transpose(buf(0:ny - 1, 1:b))
      end do
    end do
  end subroutine fft_xy

  !> Transforms along z of y slabs b(nx, nyl, nz).
  subroutine fft_z(bz, sgn)
    complex(dp), intent(inout) :: bz(0:, 0:, 0:)
    integer, intent(in) :: sgn
    complex(dp) :: buf(0:nz - 1, blk)
    integer :: j, i, b
    do j = 0, nyl - 1
      do i = 0, nx - 1, blk
        b = min(blk, nx - i)
        buf(:, 1:b) = transpose(bz(i:i + b - 1, j, :))
        call fft_lines(buf(:, 1:b), nz, sgn)
        bz(i:i + b - 1, j, :) = transpose(buf(:, 1:b))
      end do
    end do
  end subroutine fft_z

  !> z slabs -> y slabs (to_y) or back, one all-to-all.
  subroutine swap(a, bz, to_y)
    complex(dp), intent(inout) :: a(0:, 0:, 0:), bz(0:, 0:, 0:)
    logical, intent(in) :: to_y
    integer :: p, cnt, ierr, o
    cnt = nx * nyl * nzl
    do p = 0, nprocs - 1
      o = p * cnt
      if (to_y) then
        sbuf(o + 1:o + cnt) = reshape(a(:, p * nyl:(p + 1) * nyl - 1, :), [cnt])
      else
        sbuf(o + 1:o + cnt) = reshape(bz(:, :, p * nzl:(p + 1) * nzl - 1), [cnt])
      end if
    end do
    call mpi_alltoall(sbuf, cnt, mpi_double_complex, rbuf, cnt, mpi_double_complex, comm, ierr)
    do p = 0, nprocs - 1
      o = p * cnt
      if (to_y) then
        bz(:, :, p * nzl:(p + 1) * nzl - 1) = reshape(rbuf(o + 1:o + cnt), [nx, nyl, nzl])
      else
        a(:, p * nyl:(p + 1) * nyl - 1, :) = reshape(rbuf(o + 1:o + cnt), [nx, nyl, nzl])
      end if
    end do
  end subroutine swap

  subroutine ft_run(cls)
    character, intent(in) :: cls
    integer :: niter, it, i, j, k, jg, ierr, ii, jj, kk, q
    complex(dp), allocatable :: ref(:), a(:, :, :), u0(:, :, :), u1(:, :, :), sums(:)
    real(dp), allocatable :: tw(:, :, :), line(:)
    real(dp) :: x0, start, an, ap, t, mops, ntotal, chk(2), chkg(2)
    logical :: ok
    character(24) :: key

    call ft_class(cls, niter, ref)
    if (.not. is_power_of_two(nprocs) .or. nprocs > min(ny, nz)) &
      call npb_abort('FT needs a power-of-two number of ranks, at most ny and nz')
    nzl = nz / nprocs
    nyl = ny / nprocs
    ntotal = real(nx, dp) * ny * nz
    allocate (a(0:nx - 1, 0:ny - 1, 0:nzl - 1), u0(0:nx - 1, 0:nyl - 1, 0:nz - 1), &
              u1(0:nx - 1, 0:nyl - 1, 0:nz - 1), tw(0:nx - 1, 0:nyl - 1, 0:nz - 1), &
              sbuf(nx * nyl * nz), rbuf(nx * nyl * nz), sums(niter))

    call timed_start()
    ! exp(-4 alpha pi^2 |k|^2), wave numbers folded to -n/2 .. n/2-1
    ap = -4.0_dp * alpha * pi * pi
    do k = 0, nz - 1
      kk = mod(k + nz / 2, nz) - nz / 2
      do j = 0, nyl - 1
        jj = mod(me * nyl + j + ny / 2, ny) - ny / 2
        do i = 0, nx - 1
          ii = mod(i + nx / 2, nx) - nx / 2
          tw(i, j, k) = exp(ap * real(ii * ii + jj * jj + kk * kk, dp))
        end do
      end do
    end do
    ! the initial field: plane k starts 2*nx*ny*k places into the sequence
    an = powmod46(npb_a, int(2 * nx, int64) * ny)
    start = npb_seed
    x0 = randlc(start, powmod46(an, int(me * nzl, int64)))
    allocate (line(2 * nx))
    do k = 0, nzl - 1
      x0 = start
      do j = 0, ny - 1
        call vranlc(2 * nx, x0, npb_a, line)
        a(:, j, k) = cmplx(line(1::2), line(2::2), dp)
      end do
      x0 = randlc(start, an)
    end do
    call fft_xy(a, 1)
    call swap(a, u0, .true.)
    call fft_z(u0, 1)
    do it = 1, niter
      u0 = u0 * tw
      u1 = u0
      call fft_z(u1, -1)
      call swap(a, u1, .false.)
      call fft_xy(a, -1)
      chk = 0
      do q = 1, 1024
        k = mod(5 * q, nz)
        if (k / nzl /= me) cycle
        i = mod(q, nx)
        jg = mod(3 * q, ny)
        chk = chk + [real(a(i, jg, k - me * nzl)), aimag(a(i, jg, k - me * nzl))]
      end do
      call mpi_allreduce(chk, chkg, 2, mpi_double_precision, mpi_sum, comm, ierr)
      sums(it) = cmplx(chkg(1), chkg(2), dp) / ntotal
      if (me == 0) write (*, '(" T = ",i5,5x,"Checksum = ",2es22.12e3)') it, sums(it)
    end do
    t = timed_stop()

    mops = 1.0e-6_dp * ntotal * (14.8157_dp + 7.19641_dp * log(ntotal) &
                                 + (5.23518_dp + 7.21113_dp * log(ntotal)) * niter) / t
    ok = .true.
    do it = 1, niter
      write (key, '("ft_sum_re_",i0)') it
      call check_rel(trim(key), real(sums(it)), real(ref(it)), eps, ok)
      call put(trim(key), real(sums(it)))
      write (key, '("ft_sum_im_",i0)') it
      call check_rel(trim(key), aimag(sums(it)), aimag(ref(it)), eps, ok)
      call put(trim(key), aimag(sums(it)))
    end do
    call report_head('FT', cls)
    if (me == 0) then
      write (*, '(" Size = ",i0,"x",i0,"x",i0,"  Iterations = ",i0)') nx, ny, nz, niter
    end if
    call put_int('ft_iterations', niter)
    call report_tail('ft', t, mops, ok)
    deallocate (sbuf, rbuf)
  end subroutine ft_run

end module npb_ft
